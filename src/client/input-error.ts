/**
 * An input of the client that cannot be used (a file that is missing or of the wrong kind, an
 * option not set), found before anything is sent; names the option and the file. CLI exit 2.
 */
export class ClientInputError extends Error {
  constructor(
    /** The library option: `server`, `card`, `key`, `password`, `helper.ca`, ... */
    readonly option: string,
    message: string,
  ) {
    super(message);
  }
}
