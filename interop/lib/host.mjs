// The lifetime of a host a launcher starts as a child (the control relay,
// the external author): it listens on loopback ports the kernel picks,
// announces them as one JSON line on stdout, which the launcher waits
// for, and exits when told to or when its parent's pipe closes.

const listen = (server) =>
  new Promise((resolve, reject) => {
    server.once("error", reject);
    // Port 0: the kernel picks a free port, so there is no race to find one.
    server.listen(0, "127.0.0.1", () => resolve(server.address().port));
  });

/** Serve each named server, announce {name: port, …}, and live as a child. */
export async function serveAsChild(servers) {
  const ports = {};
  for (const [name, server] of Object.entries(servers)) ports[name] = await listen(server);
  process.stdout.write(`${JSON.stringify(ports)}\n`);
  const stop = () => process.exit(0);
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  process.stdin.on("end", stop);
  process.stdin.resume();
}
