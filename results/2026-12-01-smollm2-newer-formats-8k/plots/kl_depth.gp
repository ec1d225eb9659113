# kl_depth.gp: rendered by strata (report_render); run: gnuplot kl_depth.gp
set terminal pngcairo size 1000,620 font "DejaVu Sans,11" noenhanced
set output "kl_depth.png"
set datafile missing "?"
set title "KL and JS vs depth (smollm2-135m-instruct-q4_1-f32-f16-q8_0+rot-q8_0+roth-q4_0+rot-int8+roth-kivi2-kivi4-tq3-tq4-q8_0_q4_0)"
set xlabel "Depth (tokens in the prefix)"
set ylabel "Divergence from the reference (nats, log scale)"
set grid
set key outside top center horizontal box
set logscale y
set format y "%.0e"
plot "kl_depth_0.dat" using 1:2:4 with filledcurves fc rgb "#e0e0e0" title "band: noise floor to 10x floor", "kl_depth_0.dat" using 1:2 with lines lw 2 lc rgb "#7f7f7f" title "noise floor KL(fp16‖fp32)", "kl_depth_2.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#2ca02c" title "KL(q8_0+rot‖fp16)", "kl_depth_2.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#2ca02c" title "JS(q8_0+rot, fp16)", "kl_depth_3.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#9467bd" title "KL(q8_0+roth‖fp16)", "kl_depth_3.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#9467bd" title "JS(q8_0+roth, fp16)", "kl_depth_4.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#ff7f0e" title "KL(q4_0+rot‖fp16)", "kl_depth_4.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#ff7f0e" title "JS(q4_0+rot, fp16)", "kl_depth_5.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#8c564b" title "KL(int8+roth‖fp16)", "kl_depth_5.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#8c564b" title "JS(int8+roth, fp16)", "kl_depth_6.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#e377c2" title "KL(kivi2‖fp16)", "kl_depth_6.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#e377c2" title "JS(kivi2, fp16)", "kl_depth_7.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#17becf" title "KL(kivi4‖fp16)", "kl_depth_7.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#17becf" title "JS(kivi4, fp16)", "kl_depth_8.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "KL(tq3‖fp16)", "kl_depth_8.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#1f77b4" title "JS(tq3, fp16)", "kl_depth_9.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#d62728" title "KL(tq4‖fp16)", "kl_depth_9.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#d62728" title "JS(tq4, fp16)", "kl_depth_10.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#2ca02c" title "KL(K:q8_0,V:q4_0‖fp16)", "kl_depth_10.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#2ca02c" title "JS(K:q8_0,V:q4_0, fp16)"
set terminal svg size 1000,620 font "DejaVu Sans,11" noenhanced
set output "kl_depth.svg"
replot
unset output
