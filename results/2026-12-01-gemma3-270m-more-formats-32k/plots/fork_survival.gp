# fork_survival.gp: rendered by strata (report_render); run: gnuplot fork_survival.gp
set terminal pngcairo size 1000,620 font "DejaVu Sans,11" noenhanced
set output "fork_survival.png"
set datafile missing "?"
set title "Fork survival, Kaplan-Meier with 95% Greenwood band (gemma-3-270m-q4_k_m-f16-e5m2s-q8_0+rot-q8_0+roth-int8+roth-q4_0+roth-tq3-kivi2-q8_0_q4_0)"
set xlabel "Generated token index i"
set ylabel "Share of depths not yet forked, S(i) = P(fork > i)"
set grid
set key outside top center horizontal box
set yrange [0:1.05]
set xrange [0:32]
plot "fork_survival_1.dat" using 1:3:4 with filledcurves fc rgb "#d62728" fs transparent solid 0.15 noborder notitle, "fork_survival_1.dat" using 1:2 with lines lw 2.5 lc rgb "#d62728" title "e5m2s vs fp16 (16 depths)", "fork_survival_2.dat" using 1:3:4 with filledcurves fc rgb "#2ca02c" fs transparent solid 0.15 noborder notitle, "fork_survival_2.dat" using 1:2 with lines lw 2.5 lc rgb "#2ca02c" title "q8_0+rot vs fp16 (16 depths)", "fork_survival_3.dat" using 1:3:4 with filledcurves fc rgb "#9467bd" fs transparent solid 0.15 noborder notitle, "fork_survival_3.dat" using 1:2 with lines lw 2.5 lc rgb "#9467bd" title "q8_0+roth vs fp16 (16 depths)", "fork_survival_4.dat" using 1:3:4 with filledcurves fc rgb "#ff7f0e" fs transparent solid 0.15 noborder notitle, "fork_survival_4.dat" using 1:2 with lines lw 2.5 lc rgb "#ff7f0e" title "int8+roth vs fp16 (16 depths)", "fork_survival_5.dat" using 1:3:4 with filledcurves fc rgb "#8c564b" fs transparent solid 0.15 noborder notitle, "fork_survival_5.dat" using 1:2 with lines lw 2.5 lc rgb "#8c564b" title "q4_0+roth vs fp16 (16 depths)", "fork_survival_6.dat" using 1:3:4 with filledcurves fc rgb "#e377c2" fs transparent solid 0.15 noborder notitle, "fork_survival_6.dat" using 1:2 with lines lw 2.5 lc rgb "#e377c2" title "tq3 vs fp16 (16 depths)", "fork_survival_7.dat" using 1:3:4 with filledcurves fc rgb "#17becf" fs transparent solid 0.15 noborder notitle, "fork_survival_7.dat" using 1:2 with lines lw 2.5 lc rgb "#17becf" title "kivi2 vs fp16 (16 depths)", "fork_survival_8.dat" using 1:3:4 with filledcurves fc rgb "#1f77b4" fs transparent solid 0.15 noborder notitle, "fork_survival_8.dat" using 1:2 with lines lw 2.5 lc rgb "#1f77b4" title "K:q8_0,V:q4_0 vs fp16 (16 depths)"
set terminal svg size 1000,620 font "DejaVu Sans,11" noenhanced
set output "fork_survival.svg"
replot
unset output
