from bench.nth_farthest import main

main()
