# kl_depth.gp: rendered by strata (report_render); run: gnuplot kl_depth.gp
set terminal pngcairo size 1000,620 font "DejaVu Sans,11" noenhanced
set output "kl_depth.png"
set datafile missing "?"
set title "KL and JS vs depth (gemma-3-270m-q4_k_m-f16-f32-int8-q8_0+rotp-llama_f16-llama_q8_0-llama_q4_0)"
set xlabel "Depth (tokens in the prefix)"
set ylabel "Divergence from the reference (nats, log scale)"
set grid
set key outside top center horizontal box
set logscale y
set format y "%.0e"
plot "kl_depth_1.dat" using 1:2:4 with filledcurves fc rgb "#e0e0e0" title "band: noise floor to 10x floor", "kl_depth_1.dat" using 1:2 with lines lw 2 lc rgb "#7f7f7f" title "noise floor KL(fp16‖fp32)", "kl_depth_2.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#2ca02c" title "KL(int8‖fp16)", "kl_depth_2.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#2ca02c" title "JS(int8, fp16)", "kl_depth_3.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#9467bd" title "KL(q8_0+rotp‖fp16)", "kl_depth_3.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#9467bd" title "JS(q8_0+rotp, fp16)", "kl_depth_4.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#ff7f0e" title "KL(fp16 (llama:f16)‖fp16)", "kl_depth_4.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#ff7f0e" title "JS(fp16 (llama:f16), fp16)", "kl_depth_5.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#8c564b" title "KL(q8_0‖fp16)", "kl_depth_5.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#8c564b" title "JS(q8_0, fp16)", "kl_depth_6.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#e377c2" title "KL(q4_0‖fp16)", "kl_depth_6.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#e377c2" title "JS(q4_0, fp16)"
set terminal svg size 1000,620 font "DejaVu Sans,11" noenhanced
set output "kl_depth.svg"
replot
unset output
