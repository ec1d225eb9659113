# kl_entropy.gp: rendered by strata (report_render); run: gnuplot kl_entropy.gp
set terminal pngcairo size 1000,620 font "DejaVu Sans,11" noenhanced
set output "kl_entropy.png"
set datafile missing "?"
set title "KL vs reference entropy (smollm2-135m-instruct-q4_1-f32-f16-q8_0+rot-q8_0+roth-q4_0+rot-int8+roth-kivi2-kivi4-tq3-tq4-q8_0_q4_0)"
set xlabel "Entropy of the reference distribution (nats)"
set ylabel "KL(arm‖ref) (nats, log scale)"
set grid
set key outside top center horizontal box
set logscale y
set format y "%.0e"
plot "kl_entropy_2.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#802ca02c" title "KL(q8_0+rot‖fp16) at depths", "kl_entropy_3.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#809467bd" title "KL(q8_0+roth‖fp16) at depths", "kl_entropy_4.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#80ff7f0e" title "KL(q4_0+rot‖fp16) at depths", "kl_entropy_5.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#808c564b" title "KL(int8+roth‖fp16) at depths", "kl_entropy_6.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#80e377c2" title "KL(kivi2‖fp16) at depths", "kl_entropy_7.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#8017becf" title "KL(kivi4‖fp16) at depths", "kl_entropy_8.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#801f77b4" title "KL(tq3‖fp16) at depths", "kl_entropy_9.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#80d62728" title "KL(tq4‖fp16) at depths", "kl_entropy_10.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#802ca02c" title "KL(K:q8_0,V:q4_0‖fp16) at depths"
set terminal svg size 1000,620 font "DejaVu Sans,11" noenhanced
set output "kl_entropy.svg"
replot
unset output
