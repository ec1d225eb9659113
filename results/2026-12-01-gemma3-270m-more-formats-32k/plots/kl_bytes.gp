# kl_bytes.gp: rendered by strata (report_render); run: gnuplot kl_bytes.gp
set terminal pngcairo size 1000,620 font "DejaVu Sans,11" noenhanced
set output "kl_bytes.png"
set datafile missing "?"
set title "KV size against divergence, mean and 95% CI (gemma-3-270m-q4_k_m-f16-e5m2s-q8_0+rot-q8_0+roth-int8+roth-q4_0+roth-tq3-kivi2-q8_0_q4_0)"
set xlabel "KV cache bytes per token (all layers, K and V)"
set ylabel "Mean KL(arm‖ref) (nats, log scale)"
set grid
set key outside top center horizontal box
set logscale y
set format y "%.0e"
set logscale x 2
set offsets graph 0.05, graph 0.15, graph 0.05, graph 0.05
plot "kl_bytes_1.dat" using 1:2:3:4 with yerrorbars pt 7 ps 1.3 lc rgb "#d62728" title "e5m2s", "kl_bytes_1.dat" using 1:2:5 with labels offset 0.8,0.8 left tc rgb "#d62728" notitle, "kl_bytes_2.dat" using 1:2:3:4 with yerrorbars pt 7 ps 1.3 lc rgb "#2ca02c" title "q8_0+rot", "kl_bytes_2.dat" using 1:2:5 with labels offset 0.8,0.8 left tc rgb "#2ca02c" notitle, "kl_bytes_3.dat" using 1:2:3:4 with yerrorbars pt 7 ps 1.3 lc rgb "#9467bd" title "q8_0+roth", "kl_bytes_3.dat" using 1:2:5 with labels offset 0.8,0.8 left tc rgb "#9467bd" notitle, "kl_bytes_4.dat" using 1:2:3:4 with yerrorbars pt 7 ps 1.3 lc rgb "#ff7f0e" title "int8+roth", "kl_bytes_4.dat" using 1:2:5 with labels offset 0.8,0.8 left tc rgb "#ff7f0e" notitle, "kl_bytes_5.dat" using 1:2:3:4 with yerrorbars pt 7 ps 1.3 lc rgb "#8c564b" title "q4_0+roth", "kl_bytes_5.dat" using 1:2:5 with labels offset 0.8,0.8 left tc rgb "#8c564b" notitle, "kl_bytes_6.dat" using 1:2:3:4 with yerrorbars pt 7 ps 1.3 lc rgb "#e377c2" title "tq3", "kl_bytes_6.dat" using 1:2:5 with labels offset 0.8,0.8 left tc rgb "#e377c2" notitle, "kl_bytes_7.dat" using 1:2:3:4 with yerrorbars pt 7 ps 1.3 lc rgb "#17becf" title "kivi2", "kl_bytes_7.dat" using 1:2:5 with labels offset 0.8,0.8 left tc rgb "#17becf" notitle, "kl_bytes_8.dat" using 1:2:3:4 with yerrorbars pt 7 ps 1.3 lc rgb "#1f77b4" title "K:q8_0,V:q4_0", "kl_bytes_8.dat" using 1:2:5 with labels offset 0.8,0.8 left tc rgb "#1f77b4" notitle
set terminal svg size 1000,620 font "DejaVu Sans,11" noenhanced
set output "kl_bytes.svg"
replot
unset output
