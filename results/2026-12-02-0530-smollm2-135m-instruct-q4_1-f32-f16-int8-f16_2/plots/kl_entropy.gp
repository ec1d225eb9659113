# kl_entropy.gp: rendered by strata (report_render); run: gnuplot kl_entropy.gp
set terminal pngcairo size 1000,620 font "DejaVu Sans,11" noenhanced
set output "kl_entropy.png"
set datafile missing "?"
set title "KL vs reference entropy (smollm2-135m-instruct-q4_1-f32-f16-int8-f16_2)"
set xlabel "Entropy of the reference distribution (nats)"
set ylabel "KL(arm‖ref) (nats, log scale)"
set grid
set key outside top center horizontal box
set logscale y
set format y "%.0e"
plot "kl_entropy_2.dat" using 1:2 with points pt 7 ps 0.6 lc rgb "#802ca02c" title "KL(int8‖fp16) at positions"
set terminal svg size 1000,620 font "DejaVu Sans,11" noenhanced
set output "kl_entropy.svg"
replot
unset output
