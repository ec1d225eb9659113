# kl_depth.gp: rendered by strata (report_render); run: gnuplot kl_depth.gp
set terminal pngcairo size 1000,620 font "DejaVu Sans,11" noenhanced
set output "kl_depth.png"
set datafile missing "?"
set title "KL and JS vs depth (smollm2-135m-instruct-q4_1-f32-f16-int8-f16_2)"
set xlabel "Depth (tokens in the prefix)"
set ylabel "Divergence from the reference (nats, log scale)"
set grid
set key outside top center horizontal box
set logscale y
set format y "%.0e"
plot "kl_depth_0.dat" using 1:2:4 with filledcurves fc rgb "#e0e0e0" title "band: noise floor to 10x floor", "kl_depth_0.dat" using 1:2 with lines lw 2 lc rgb "#7f7f7f" title "noise floor KL(fp16‖fp32)", "kl_depth_2.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#2ca02c" title "KL(int8‖fp16)", "kl_depth_2.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#2ca02c" title "JS(int8, fp16)"
set terminal svg size 1000,620 font "DejaVu Sans,11" noenhanced
set output "kl_depth.svg"
replot
unset output
