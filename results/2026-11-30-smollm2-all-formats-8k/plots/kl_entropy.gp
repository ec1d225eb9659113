# kl_entropy.gp: rendered by strata (report_render); run: gnuplot kl_entropy.gp
set terminal pngcairo size 1000,620 font "DejaVu Sans,11" noenhanced
set output "kl_entropy.png"
set datafile missing "?"
set title "KL vs reference entropy (smollm2-135m-instruct-q4_1-f32-bf16-f16-int8-q8_0-q4_0-q4_0r-fp8-q4_1-q5_0-q5_1-iq4_nl-e5m2-e4m3s-e5m2s-nvfp4-mxfp4)"
set xlabel "Entropy of the reference distribution (nats)"
set ylabel "KL(arm‖ref) (nats, log scale)"
set grid
set key outside top center horizontal box
set logscale y
set format y "%.0e"
plot "kl_entropy_1.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#80d62728" title "KL(bf16‖fp16) at depths", "kl_entropy_3.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#809467bd" title "KL(int8‖fp16) at depths", "kl_entropy_4.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#80ff7f0e" title "KL(q8_0‖fp16) at depths", "kl_entropy_5.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#808c564b" title "KL(q4_0‖fp16) at depths", "kl_entropy_6.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#80e377c2" title "KL(q4_0r‖fp16) at depths", "kl_entropy_7.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#8017becf" title "KL(fp8‖fp16) at depths", "kl_entropy_8.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#801f77b4" title "KL(q4_1‖fp16) at depths", "kl_entropy_9.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#80d62728" title "KL(q5_0‖fp16) at depths", "kl_entropy_10.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#802ca02c" title "KL(q5_1‖fp16) at depths", "kl_entropy_11.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#809467bd" title "KL(iq4_nl‖fp16) at depths", "kl_entropy_12.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#80ff7f0e" title "KL(e5m2‖fp16) at depths", "kl_entropy_13.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#808c564b" title "KL(e4m3s‖fp16) at depths", "kl_entropy_14.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#80e377c2" title "KL(e5m2s‖fp16) at depths", "kl_entropy_15.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#8017becf" title "KL(nvfp4‖fp16) at depths", "kl_entropy_16.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "#801f77b4" title "KL(mxfp4‖fp16) at depths"
set terminal svg size 1000,620 font "DejaVu Sans,11" noenhanced
set output "kl_entropy.svg"
replot
unset output
