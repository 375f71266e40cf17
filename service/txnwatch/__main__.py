from txnwatch.cli import main

main()
