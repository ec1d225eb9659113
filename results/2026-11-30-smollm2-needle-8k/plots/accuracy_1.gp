# accuracy_1.gp: rendered by strata (needle report); run: gnuplot accuracy_1.gp
set terminal pngcairo size 1000,512 font "DejaVu Sans,11" noenhanced
set output "accuracy_1.png"
set multiplot layout 1,2 title "Retrieval accuracy, f16 (smollm2-135m-instruct-q4_1-needle)"
set cbrange [0:1]
set palette defined (0 "#d73027", 0.5 "#fee08b", 1 "#1a9850")
set xrange [-0.5:4.5]
set yrange [-0.5:3.5]
set xtics ("0" 0, "25" 1, "50" 2, "75" 3, "100" 4)
set ytics ("1024" 0, "2048" 1, "4096" 2, "8192" 3)
set xlabel "Needle depth (% of the haystack)"
set ylabel "Prompt length (tokens)"
unset key
set style fill solid 1.0 noborder
set title "raw prompts"
plot "accuracy_1_raw.dat" using 1:2:(0.5):(0.5):3 with boxxyerror fc palette, "" using 1:2:4 with labels font ",10"
set title "chat prompts"
plot "accuracy_1_chat.dat" using 1:2:(0.5):(0.5):3 with boxxyerror fc palette, "" using 1:2:4 with labels font ",10"
unset multiplot
set terminal svg size 1000,512 font "DejaVu Sans,11" noenhanced
set output "accuracy_1.svg"
set multiplot layout 1,2 title "Retrieval accuracy, f16 (smollm2-135m-instruct-q4_1-needle)"
set cbrange [0:1]
set palette defined (0 "#d73027", 0.5 "#fee08b", 1 "#1a9850")
set xrange [-0.5:4.5]
set yrange [-0.5:3.5]
set xtics ("0" 0, "25" 1, "50" 2, "75" 3, "100" 4)
set ytics ("1024" 0, "2048" 1, "4096" 2, "8192" 3)
set xlabel "Needle depth (% of the haystack)"
set ylabel "Prompt length (tokens)"
unset key
set style fill solid 1.0 noborder
set title "raw prompts"
plot "accuracy_1_raw.dat" using 1:2:(0.5):(0.5):3 with boxxyerror fc palette, "" using 1:2:4 with labels font ",10"
set title "chat prompts"
plot "accuracy_1_chat.dat" using 1:2:(0.5):(0.5):3 with boxxyerror fc palette, "" using 1:2:4 with labels font ",10"
unset multiplot
unset output
