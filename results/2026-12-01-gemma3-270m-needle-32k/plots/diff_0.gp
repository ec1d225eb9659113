# diff_0.gp: rendered by strata (needle report); run: gnuplot diff_0.gp
set terminal pngcairo size 580,464 font "DejaVu Sans,11" noenhanced
set output "diff_0.png"
set multiplot layout 1,1 title "Accuracy difference f32 − f16 (gemma-3-270m-q4_k_m-needle)"
set cbrange [-1:1]
set palette defined (-1 "#b2182b", 0 "#f7f7f7", 1 "#2166ac")
set xrange [-0.5:2.5]
set yrange [-0.5:2.5]
set xtics ("0" 0, "50" 1, "100" 2)
set ytics ("4096" 0, "16384" 1, "32768" 2)
set xlabel "Needle depth (% of the haystack)"
set ylabel "Prompt length (tokens)"
unset key
set style fill solid 1.0 noborder
set title "raw prompts (arm − reference)"
plot "diff_0_raw.dat" using 1:2:(0.5):(0.5):3 with boxxyerror fc palette, "" using 1:2:4 with labels font ",10"
unset multiplot
set terminal svg size 580,464 font "DejaVu Sans,11" noenhanced
set output "diff_0.svg"
set multiplot layout 1,1 title "Accuracy difference f32 − f16 (gemma-3-270m-q4_k_m-needle)"
set cbrange [-1:1]
set palette defined (-1 "#b2182b", 0 "#f7f7f7", 1 "#2166ac")
set xrange [-0.5:2.5]
set yrange [-0.5:2.5]
set xtics ("0" 0, "50" 1, "100" 2)
set ytics ("4096" 0, "16384" 1, "32768" 2)
set xlabel "Needle depth (% of the haystack)"
set ylabel "Prompt length (tokens)"
unset key
set style fill solid 1.0 noborder
set title "raw prompts (arm − reference)"
plot "diff_0_raw.dat" using 1:2:(0.5):(0.5):3 with boxxyerror fc palette, "" using 1:2:4 with labels font ",10"
unset multiplot
unset output
