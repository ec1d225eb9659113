# kl_depth.gp: rendered by strata (report_render); run: gnuplot kl_depth.gp
set terminal pngcairo size 1000,620 font "DejaVu Sans,11" noenhanced
set output "kl_depth.png"
set datafile missing "?"
set title "KL and JS vs depth (gemma-3-270m-q4_k_m-f16-e5m2s-q8_0+rot-q8_0+roth-int8+roth-q4_0+roth-tq3-kivi2-q8_0_q4_0)"
set xlabel "Depth (tokens in the prefix)"
set ylabel "Divergence from the reference (nats, log scale)"
set grid
set key outside top center horizontal box
set logscale y
set format y "%.0e"
plot "kl_depth_1.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#d62728" title "KL(e5m2s‖fp16)", "kl_depth_1.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#d62728" title "JS(e5m2s, fp16)", "kl_depth_2.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#2ca02c" title "KL(q8_0+rot‖fp16)", "kl_depth_2.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#2ca02c" title "JS(q8_0+rot, fp16)", "kl_depth_3.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#9467bd" title "KL(q8_0+roth‖fp16)", "kl_depth_3.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#9467bd" title "JS(q8_0+roth, fp16)", "kl_depth_4.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#ff7f0e" title "KL(int8+roth‖fp16)", "kl_depth_4.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#ff7f0e" title "JS(int8+roth, fp16)", "kl_depth_5.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#8c564b" title "KL(q4_0+roth‖fp16)", "kl_depth_5.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#8c564b" title "JS(q4_0+roth, fp16)", "kl_depth_6.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#e377c2" title "KL(tq3‖fp16)", "kl_depth_6.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#e377c2" title "JS(tq3, fp16)", "kl_depth_7.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#17becf" title "KL(kivi2‖fp16)", "kl_depth_7.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#17becf" title "JS(kivi2, fp16)", "kl_depth_8.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#1f77b4" title "KL(K:q8_0,V:q4_0‖fp16)", "kl_depth_8.dat" using 1:3 with linespoints lw 1 dt 2 pt 6 lc rgb "#1f77b4" title "JS(K:q8_0,V:q4_0, fp16)"
set terminal svg size 1000,620 font "DejaVu Sans,11" noenhanced
set output "kl_depth.svg"
replot
unset output
