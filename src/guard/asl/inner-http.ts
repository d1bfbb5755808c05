import http from 'node:http';
import { Duplex } from 'node:stream';

/** What the tunnel decrypted: one whole HTTP/1.1 request, parsed by Node's own HTTP parser (llhttp). */
export interface InnerRequestHead {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
}

/** Marks the socket of a request that came through ASL (the app answers `asl_required` to any other). */
export const ASL_INNER = Symbol('terminus.asl.inner');

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/**
 * Runs decrypted HTTP/1.1 requests through a request handler (the application itself) as if they
 * had arrived on a connection: Node's HTTP server parses the bytes, the handler answers, and the
 * bytes it writes are the inner response. No socket exists: a duplex stream stands in for one,
 * carrying the outer request's client address.
 */
export class InnerHttp {
  private readonly checker: http.Server;
  private readonly server: http.Server;

  constructor(handler: Handler) {
    // Parse only: a request that is not exactly one complete HTTP/1.1 message never reaches the app.
    this.checker = http.createServer((req, res) => {
      (req.socket as unknown as Probe).heads.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
      req.resume();
      req.on('end', () => {
        if (!req.complete) (req.socket as unknown as Probe).bad = true;
        res.end();
      });
    });
    this.server = http.createServer((req, res) => {
      res.shouldKeepAlive = false;
      handler(req, res);
    });
    for (const s of [this.checker, this.server]) {
      // The checker gets the whole request and then the end of the stream at once, so a truncated
      // body is a parse error (clientError), not a request left waiting.
      (s as http.Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
      s.on('clientError', (_err, socket: Probe) => {
        socket.bad = true;
        if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
        else socket.destroy();
      });
    }
  }

  /** The head of the one complete request in `raw`; undefined when it is not exactly one valid HTTP/1.1 request. */
  async parse(raw: Buffer): Promise<InnerRequestHead | undefined> {
    const probe = await this.run(this.checker, raw, '127.0.0.1');
    if (probe.bad || probe.heads.length !== 1) return undefined;
    return probe.heads[0];
  }

  /** The raw HTTP/1.1 response of the app to `raw` (parse it first), the client at `remoteAddress`. */
  async dispatch(raw: Buffer, remoteAddress: string): Promise<Buffer> {
    return (await this.run(this.server, raw, remoteAddress, true)).output;
  }

  /**
   * One exchange on a stand-in connection. The checker's input ends right after the request. The
   * app's input ends only once the app has answered, as a client closes its connection after the
   * response: body-parser (through on-finished) takes a request whose socket is no longer
   * readable for one whose body is gone and reads nothing, and the app reads bodies late (after
   * the enforcement point's awaits), when an input that ended at once has long been drained.
   */
  private run(server: http.Server, raw: Buffer, remoteAddress: string, inner = false): Promise<Probe> {
    return new Promise((resolve) => {
      const out: Buffer[] = [];
      let done = false;
      const endInput = () => {
        if (!socket.destroyed && !socket.readableEnded) socket.push(null);
      };
      const finish = () => {
        if (done) return;
        done = true;
        socket.output = Buffer.concat(out);
        resolve(socket);
        // The connection closes (the server frees its parser).
        endInput();
      };
      const socket = new Duplex({
        allowHalfOpen: true,
        read() {},
        write(chunk: Buffer, _enc, cb) {
          out.push(Buffer.from(chunk));
          cb();
        },
        final(cb) {
          cb();
          finish();
        },
        destroy(err, cb) {
          finish();
          cb(err);
        },
      }) as Probe;
      socket.heads = [];
      socket.bad = false;
      const stub = () => socket;
      Object.assign(socket, { remoteAddress, remotePort: 0, remoteFamily: remoteAddress.includes(':') ? 'IPv6' : 'IPv4', setTimeout: stub, setNoDelay: stub, setKeepAlive: stub, ref: stub, unref: stub });
      if (inner) socket[ASL_INNER] = true;
      server.emit('connection', socket);
      socket.push(raw);
      if (!inner) endInput();
    });
  }
}

type Probe = Duplex & { heads: InnerRequestHead[]; bad: boolean; output: Buffer; remoteAddress: string; [ASL_INNER]?: boolean };
