# kl_entropy.gp: rendered by strata (report_render); run: gnuplot kl_entropy.gp
set terminal pngcairo size 1000,620 font "DejaVu Sans,11" noenhanced
set output "kl_entropy.png"
set datafile missing "?"
set title "KL vs reference entropy (gemma-3-270m-q4_k_m-f16-f32-int8-q8_0+rotp-llama_f16-llama_q8_0-llama_q4_0)"
set xlabel "Entropy of the reference distribution (nats)"
set ylabel "KL(arm‖ref) (nats, log scale)"
set grid
set key outside top center horizontal box
set logscale y
set format y "%.0e"
plot "kl_entropy_2.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#802ca02c" title "KL(int8‖fp16) at depths", "kl_entropy_3.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#809467bd" title "KL(q8_0+rotp‖fp16) at depths", "kl_entropy_4.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#80ff7f0e" title "KL(fp16 (llama:f16)‖fp16) at depths", "kl_entropy_5.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#808c564b" title "KL(q8_0‖fp16) at depths", "kl_entropy_6.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#80e377c2" title "KL(q4_0‖fp16) at depths"
set terminal svg size 1000,620 font "DejaVu Sans,11" noenhanced
set output "kl_entropy.svg"
replot
unset output
