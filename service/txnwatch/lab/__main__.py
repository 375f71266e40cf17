from txnwatch.lab.cli import main

main()
