// A tiny round-robin TCP load balancer on loopback, for the faults run: the
// clients get one address while replicas die and come back on new ports.
//
// Each client connection goes to the next backend in turn. A backend that
// refuses the connection (a replica just killed) is skipped for the next
// one, which is safe at this layer: nothing of the request has been sent.
// A connection already open to a backend that dies is closed, as a real
// load balancer closes it, so the client sees its request fail and its pool
// drops the socket. Nothing is parsed or logged: bytes pass as they are.
import { createServer, connect } from "node:net";

/**
 * Start the balancer in front of `backends` (base URLs like
 * http://127.0.0.1:1234). Returns {url, replace(index, url), stats, close}.
 */
export function startBalancer(backends) {
  const targets = backends.map(hostPort);
  const open = new Set();
  const stats = { connections: 0, skipped: 0, refused: 0 };
  let next = 0;

  // Try the backends from the next in turn; `tried` counts those that
  // refused, and a connection all of them refuse is closed.
  function dial(client, tried) {
    if (tried >= targets.length) {
      stats.refused += 1;
      client.destroy();
      return;
    }
    const target = targets[next % targets.length];
    next += 1;
    const upstream = connect(target);
    let connected = false;
    upstream.once("error", () => {
      if (connected) return;
      stats.skipped += 1;
      dial(client, tried + 1);
    });
    upstream.once("connect", () => {
      connected = true;
      stats.connections += 1;
      open.add(upstream);
      open.add(client);
      client.pipe(upstream).pipe(client);
      client.resume();
      const closeBoth = () => {
        open.delete(upstream);
        open.delete(client);
        client.destroy();
        upstream.destroy();
      };
      upstream.once("close", closeBoth);
      client.once("close", closeBoth);
      upstream.on("error", closeBoth);
    });
  }

  const server = createServer({ pauseOnConnect: true }, (client) => {
    client.on("error", () => client.destroy());
    dial(client, 0);
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      resolve({
        url: `http://127.0.0.1:${server.address().port}`,
        // A replica restarted on a new port takes its old place in the turn.
        replace: (index, url) => {
          targets[index] = hostPort(url);
        },
        stats,
        close: () =>
          new Promise((done) => {
            for (const socket of open) socket.destroy();
            server.close(() => done());
          }),
      });
    });
  });
}

function hostPort(url) {
  const { hostname, port } = new URL(url);
  return { host: hostname, port: Number(port) };
}
