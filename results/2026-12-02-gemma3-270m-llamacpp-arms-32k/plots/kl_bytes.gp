# kl_bytes.gp: rendered by strata (report_render); run: gnuplot kl_bytes.gp
set terminal pngcairo size 1000,620 font "DejaVu Sans,11" noenhanced
set output "kl_bytes.png"
set datafile missing "?"
set title "KV size against divergence, mean and 95% CI (gemma-3-270m-q4_k_m-f16-f32-int8-q8_0+rotp-llama_f16-llama_q8_0-llama_q4_0)"
set xlabel "KV cache bytes per token (all layers, K and V)"
set ylabel "Mean KL(arm‖ref) (nats, log scale)"
set grid
set key outside top center horizontal box
set logscale y
set format y "%.0e"
set logscale x 2
set offsets graph 0.05, graph 0.15, graph 0.05, graph 0.05
plot "kl_bytes_1.dat" using 1:2:3:4 with yerrorbars pt 7 ps 1.3 lc rgb "#7f7f7f" title "fp32 (noise floor)", "kl_bytes_1.dat" using 1:2:5 with labels offset 0.8,0.8 left tc rgb "#7f7f7f" notitle, "kl_bytes_2.dat" using 1:2:3:4 with yerrorbars pt 7 ps 1.3 lc rgb "#2ca02c" title "int8", "kl_bytes_2.dat" using 1:2:5 with labels offset 0.8,0.8 left tc rgb "#2ca02c" notitle, "kl_bytes_3.dat" using 1:2:3:4 with yerrorbars pt 7 ps 1.3 lc rgb "#9467bd" title "q8_0+rotp", "kl_bytes_3.dat" using 1:2:5 with labels offset 0.8,0.8 left tc rgb "#9467bd" notitle, "kl_bytes_4.dat" using 1:2:3:4 with yerrorbars pt 7 ps 1.3 lc rgb "#ff7f0e" title "fp16 (llama:f16)", "kl_bytes_4.dat" using 1:2:5 with labels offset 0.8,0.8 left tc rgb "#ff7f0e" notitle, "kl_bytes_5.dat" using 1:2:3:4 with yerrorbars pt 7 ps 1.3 lc rgb "#8c564b" title "q8_0", "kl_bytes_5.dat" using 1:2:5 with labels offset 0.8,0.8 left tc rgb "#8c564b" notitle, "kl_bytes_6.dat" using 1:2:3:4 with yerrorbars pt 7 ps 1.3 lc rgb "#e377c2" title "q4_0", "kl_bytes_6.dat" using 1:2:5 with labels offset 0.8,0.8 left tc rgb "#e377c2" notitle
set terminal svg size 1000,620 font "DejaVu Sans,11" noenhanced
set output "kl_bytes.svg"
replot
unset output
