"""Everything that answers HTTP: the REST API, the HTML console, the app that assembles them, the uvicorn server and the API worker processes."""
