{
  "targets": [
    {
      "target_name": "writev",
      "sources": ["src/writev.c", "src/congestion.c"],
      "conditions": [["OS=='linux'", { "sources": ["src/tun.c"] }]],
      "cflags": ["-O2"]
    }
  ]
}
