/**
 * Characters XML 1.0 cannot carry (controls but tab, LF and CR; U+FFFE and U+FFFF) and UTF-16
 * halves without their other half (no UTF-8 encoding exists for them). R4 strings must not hold
 * them (datatypes.html), so every stored value can be answered as JSON and as XML.
 */
const UNREPRESENTABLE = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const UNREPRESENTABLE_ALL = new RegExp(UNREPRESENTABLE.source, 'g');

const codePoint = (c: string) => `U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`;

/** The first such character as `U+0000`, or undefined. */
export function unrepresentableCharacter(text: string): string | undefined {
  const m = UNREPRESENTABLE.exec(text);
  return m ? codePoint(m[0]) : undefined;
}

/** `text` with every such character written as `\u0000`: for messages that quote what a client sent. */
export function representable(text: string): string {
  return UNREPRESENTABLE.test(text) ? text.replace(UNREPRESENTABLE_ALL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`) : text;
}
