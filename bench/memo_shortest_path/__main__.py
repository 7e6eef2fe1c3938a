from bench.memo_shortest_path import main

main()
