"""The daemon's processes: binding its ports, the uvicorn server it runs, the API workers and the metrics port's."""
