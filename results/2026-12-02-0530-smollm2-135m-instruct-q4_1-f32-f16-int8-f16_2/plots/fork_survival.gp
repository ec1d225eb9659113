# fork_survival.gp: rendered by strata (report_render); run: gnuplot fork_survival.gp
set terminal pngcairo size 1000,620 font "DejaVu Sans,11" noenhanced
set output "fork_survival.png"
set datafile missing "?"
set title "Fork survival, Kaplan-Meier with 95% Greenwood band (smollm2-135m-instruct-q4_1-f32-f16-int8-f16_2)"
set xlabel "Generated token index i"
set ylabel "Share of depths not yet forked, S(i) = P(fork > i)"
set grid
set key outside top center horizontal box
set yrange [0:1.05]
set xrange [0:32]
plot "fork_survival_0.dat" using 1:3:4 with filledcurves fc rgb "#7f7f7f" fs transparent solid 0.15 noborder notitle, "fork_survival_0.dat" using 1:2 with lines lw 2.5 lc rgb "#7f7f7f" title "fp32 vs fp16 (noise floor) (16 depths)", "fork_survival_2.dat" using 1:3:4 with filledcurves fc rgb "#2ca02c" fs transparent solid 0.15 noborder notitle, "fork_survival_2.dat" using 1:2 with lines lw 2.5 lc rgb "#2ca02c" title "int8 vs fp16 (16 depths)"
set terminal svg size 1000,620 font "DejaVu Sans,11" noenhanced
set output "fork_survival.svg"
replot
unset output
