from bench.memo_pai import main

main()
