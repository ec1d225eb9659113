# diff_3.gp: rendered by strata (needle report); run: gnuplot diff_3.gp
set terminal pngcairo size 1000,512 font "DejaVu Sans,11" noenhanced
set output "diff_3.png"
set multiplot layout 1,2 title "Accuracy difference q4_0 − f16 (smollm2-135m-instruct-q4_1-needle)"
set cbrange [-1:1]
set palette defined (-1 "#b2182b", 0 "#f7f7f7", 1 "#2166ac")
set xrange [-0.5:4.5]
set yrange [-0.5:3.5]
set xtics ("0" 0, "25" 1, "50" 2, "75" 3, "100" 4)
set ytics ("1024" 0, "2048" 1, "4096" 2, "8192" 3)
set xlabel "Needle depth (% of the haystack)"
set ylabel "Prompt length (tokens)"
unset key
set style fill solid 1.0 noborder
set title "raw prompts (arm − reference)"
plot "diff_3_raw.dat" using 1:2:(0.5):(0.5):3 with boxxyerror fc palette, "" using 1:2:4 with labels font ",10"
set title "chat prompts (arm − reference)"
plot "diff_3_chat.dat" using 1:2:(0.5):(0.5):3 with boxxyerror fc palette, "" using 1:2:4 with labels font ",10"
unset multiplot
set terminal svg size 1000,512 font "DejaVu Sans,11" noenhanced
set output "diff_3.svg"
set multiplot layout 1,2 title "Accuracy difference q4_0 − f16 (smollm2-135m-instruct-q4_1-needle)"
set cbrange [-1:1]
set palette defined (-1 "#b2182b", 0 "#f7f7f7", 1 "#2166ac")
set xrange [-0.5:4.5]
set yrange [-0.5:3.5]
set xtics ("0" 0, "25" 1, "50" 2, "75" 3, "100" 4)
set ytics ("1024" 0, "2048" 1, "4096" 2, "8192" 3)
set xlabel "Needle depth (% of the haystack)"
set ylabel "Prompt length (tokens)"
unset key
set style fill solid 1.0 noborder
set title "raw prompts (arm − reference)"
plot "diff_3_raw.dat" using 1:2:(0.5):(0.5):3 with boxxyerror fc palette, "" using 1:2:4 with labels font ",10"
set title "chat prompts (arm − reference)"
plot "diff_3_chat.dat" using 1:2:(0.5):(0.5):3 with boxxyerror fc palette, "" using 1:2:4 with labels font ",10"
unset multiplot
unset output
