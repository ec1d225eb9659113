# kl_bins.gp: rendered by strata (report_render); run: gnuplot kl_bins.gp
set terminal pngcairo size 1000,620 font "DejaVu Sans,11" noenhanced
set output "kl_bins.png"
set datafile missing "?"
set title "Mean KL per depth bin, 95% band (gemma-3-270m-q4_k_m-f16-f32-int8-q8_0+rotp-llama_f16-llama_q8_0-llama_q4_0)"
set xlabel "Position (middle of the depth bin)"
set ylabel "Mean KL(arm‖ref) (nats, log scale)"
set grid
set key outside top center horizontal box
set logscale y
set format y "%.0e"
set style fill transparent solid 0.2 noborder
plot "kl_bins_1.dat" using 1:3:4 with filledcurves lc rgb "#7f7f7f" notitle, "kl_bins_1.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#7f7f7f" title "fp32", "kl_bins_2.dat" using 1:3:4 with filledcurves lc rgb "#d62728" notitle, "kl_bins_2.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#d62728" title "int8", "kl_bins_3.dat" using 1:3:4 with filledcurves lc rgb "#2ca02c" notitle, "kl_bins_3.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#2ca02c" title "q8_0+rotp", "kl_bins_4.dat" using 1:3:4 with filledcurves lc rgb "#9467bd" notitle, "kl_bins_4.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#9467bd" title "fp16 (llama:f16)", "kl_bins_5.dat" using 1:3:4 with filledcurves lc rgb "#ff7f0e" notitle, "kl_bins_5.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#ff7f0e" title "q8_0", "kl_bins_6.dat" using 1:3:4 with filledcurves lc rgb "#8c564b" notitle, "kl_bins_6.dat" using 1:2 with linespoints lw 2 pt 7 lc rgb "#8c564b" title "q4_0"
set terminal svg size 1000,620 font "DejaVu Sans,11" noenhanced
set output "kl_bins.svg"
replot
unset output
