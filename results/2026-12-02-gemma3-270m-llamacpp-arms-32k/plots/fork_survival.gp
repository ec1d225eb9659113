# fork_survival.gp: rendered by strata (report_render); run: gnuplot fork_survival.gp
set terminal pngcairo size 1000,620 font "DejaVu Sans,11" noenhanced
set output "fork_survival.png"
set datafile missing "?"
set title "Fork survival, Kaplan-Meier with 95% Greenwood band (gemma-3-270m-q4_k_m-f16-f32-int8-q8_0+rotp-llama_f16-llama_q8_0-llama_q4_0)"
set xlabel "Generated token index i"
set ylabel "Share of depths not yet forked, S(i) = P(fork > i)"
set grid
set key outside top center horizontal box
set yrange [0:1.05]
set xrange [0:32]
plot "fork_survival_1.dat" using 1:3:4 with filledcurves fc rgb "#7f7f7f" fs transparent solid 0.15 noborder notitle, "fork_survival_1.dat" using 1:2 with lines lw 2.5 lc rgb "#7f7f7f" title "fp32 vs fp16 (noise floor) (16 depths)", "fork_survival_2.dat" using 1:3:4 with filledcurves fc rgb "#2ca02c" fs transparent solid 0.15 noborder notitle, "fork_survival_2.dat" using 1:2 with lines lw 2.5 lc rgb "#2ca02c" title "int8 vs fp16 (16 depths)", "fork_survival_3.dat" using 1:3:4 with filledcurves fc rgb "#9467bd" fs transparent solid 0.15 noborder notitle, "fork_survival_3.dat" using 1:2 with lines lw 2.5 lc rgb "#9467bd" title "q8_0+rotp vs fp16 (16 depths)", "fork_survival_4.dat" using 1:3:4 with filledcurves fc rgb "#ff7f0e" fs transparent solid 0.15 noborder notitle, "fork_survival_4.dat" using 1:2 with lines lw 2.5 lc rgb "#ff7f0e" title "fp16 (llama:f16) vs fp16 (16 depths)", "fork_survival_5.dat" using 1:3:4 with filledcurves fc rgb "#8c564b" fs transparent solid 0.15 noborder notitle, "fork_survival_5.dat" using 1:2 with lines lw 2.5 lc rgb "#8c564b" title "q8_0 vs fp16 (16 depths)", "fork_survival_6.dat" using 1:3:4 with filledcurves fc rgb "#e377c2" fs transparent solid 0.15 noborder notitle, "fork_survival_6.dat" using 1:2 with lines lw 2.5 lc rgb "#e377c2" title "q4_0 vs fp16 (16 depths)"
set terminal svg size 1000,620 font "DejaVu Sans,11" noenhanced
set output "fork_survival.svg"
replot
unset output
