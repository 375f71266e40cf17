from txnwatch.cli.commands import main

main()
