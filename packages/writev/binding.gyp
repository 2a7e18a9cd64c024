{
  "targets": [
    {
      "target_name": "writev",
      "sources": ["src/writev.c", "src/congestion.c"],
      "cflags": ["-O2"]
    }
  ]
}
