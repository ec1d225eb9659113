# positions_kl.gp: rendered by strata (report_render); run: gnuplot positions_kl.gp
set terminal pngcairo size 1000,620 font "DejaVu Sans,11" noenhanced
set output "positions_kl.png"
set datafile missing "?"
set title "Per-position KL with rolling median (gemma-3-270m-q4_k_m-f16-f32-int8-q8_0+rotp-llama_f16-llama_q8_0-llama_q4_0)"
set xlabel "Position in the document (token index)"
set ylabel "KL (nats, log scale)"
set grid
set key outside top center horizontal box
set logscale y
set format y "%.0e"
plot "positions_kl_1.dat" using 1:2 with points pt 7 ps 0.3 lc rgb "#a07f7f7f" title "noise floor KL(fp16‖fp32), per position", "positions_kl_2.dat" using 1:2 with points pt 7 ps 0.3 lc rgb "#a02ca02c" title "KL(int8‖fp16), per position", "positions_kl_3.dat" using 1:2 with points pt 7 ps 0.3 lc rgb "#a09467bd" title "KL(q8_0+rotp‖fp16), per position", "positions_kl_4.dat" using 1:2 with points pt 7 ps 0.3 lc rgb "#a0ff7f0e" title "KL(fp16 (llama:f16)‖fp16), per position", "positions_kl_5.dat" using 1:2 with points pt 7 ps 0.3 lc rgb "#a08c564b" title "KL(q8_0‖fp16), per position", "positions_kl_6.dat" using 1:2 with points pt 7 ps 0.3 lc rgb "#a0e377c2" title "KL(q4_0‖fp16), per position", "positions_kl_1.dat" using 1:3 with lines lw 2.5 lc rgb "#7f7f7f" title "noise floor KL(fp16‖fp32), rolling median of 201", "positions_kl_2.dat" using 1:3 with lines lw 2.5 lc rgb "#2ca02c" title "KL(int8‖fp16), rolling median of 201", "positions_kl_3.dat" using 1:3 with lines lw 2.5 lc rgb "#9467bd" title "KL(q8_0+rotp‖fp16), rolling median of 201", "positions_kl_4.dat" using 1:3 with lines lw 2.5 lc rgb "#ff7f0e" title "KL(fp16 (llama:f16)‖fp16), rolling median of 201", "positions_kl_5.dat" using 1:3 with lines lw 2.5 lc rgb "#8c564b" title "KL(q8_0‖fp16), rolling median of 201", "positions_kl_6.dat" using 1:3 with lines lw 2.5 lc rgb "#e377c2" title "KL(q4_0‖fp16), rolling median of 201"
set terminal svg size 1000,620 font "DejaVu Sans,11" noenhanced
set output "positions_kl.svg"
replot
unset output
