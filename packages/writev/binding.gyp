{
  "targets": [
    {
      "target_name": "writev",
      "sources": ["src/writev.c"],
      "cflags": ["-O2"]
    }
  ]
}
