/**
 * A Kubernetes list (`{"kind":"PodList",...,"items":[...]}`) read as it
 * arrives: each element of the top-level `items` is parsed on its own and
 * handed over as soon as its text is complete, so a page of 500 Pods (about
 * 5 MiB of JSON, several times that as objects) is never held whole, as
 * text or as objects; only the element being received is. What the caller
 * keeps of an element is up to it: the rest dies young.
 *
 * The scanner only finds where elements start and end (strings, escapes,
 * nesting); JSON.parse still judges each element, and the remainder of the
 * object (its `metadata`, with `continue`) is parsed at the end with
 * `items` empty.
 */

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/** The raw key whose array is streamed: the API server never escapes it. */
const ITEMS_KEY = '"items"';

export class ListItemStream {
  readonly #onItem: (item: unknown) => void;
  /** The text not yet let go: all of it before `items`, then from the element being received. */
  #text = '';
  /** Where scanning goes on in #text. */
  #pos = 0;
  #depth = 0;
  #inString = false;
  /** At depth 1, the next string is a member's name. */
  #expectKey = false;
  #keyStart = -1;
  #lastKey = '';
  /** Inside the top-level `items` array. */
  #inItems = false;
  /** Where the element being received starts in #text. */
  #itemStart = 0;
  /** A comma came before the element being received: there must be one. */
  #separated = false;
  /** The object up to and including `items`' `[`, once seen. */
  #head: string | undefined;
  /** Where the text after `items`' `]` starts in #text, once seen. */
  #tailStart = -1;

  constructor(onItem: (item: unknown) => void) {
    this.#onItem = onItem;
  }

  /** Takes the next piece of the text (any split, even within a string or an escape). */
  write(piece: string): void {
    this.#text += piece;
    this.#scan();
    // Let go of what is handed over already: the elements before the one being received, or all of them.
    if (this.#inItems) this.#drop(this.#itemStart);
    else if (this.#tailStart > 0) this.#drop(this.#tailStart);
  }

  /** How much text is held (the element being received, or what is not in items): for tests. */
  get heldLength(): number {
    return this.#text.length;
  }

  /** The object without its elements (`items` empty); throws when the text was cut short or is not JSON. */
  end(): unknown {
    if (this.#depth !== 0 || this.#inString || this.#inItems) throw new SyntaxError('the list ended before its JSON did');
    const rest = this.#head === undefined ? this.#text : this.#head + this.#text.slice(this.#tailStart);
    return JSON.parse(rest);
  }

  #scan(): void {
    const text = this.#text;
    const length = text.length;
    let pos = this.#pos;
    while (pos < length) {
      if (this.#inString) {
        const end = stringEnd(text, pos);
        if (end < 0) {
          pos = length;
          break;
        }
        this.#inString = false;
        if (this.#keyStart >= 0) {
          this.#lastKey = text.slice(this.#keyStart, end + 1);
          this.#keyStart = -1;
        }
        pos = end + 1;
        continue;
      }
      const code = text.charCodeAt(pos);
      if (code === QUOTE) {
        this.#inString = true;
        if (this.#depth === 1 && this.#expectKey) {
          this.#keyStart = pos;
          this.#expectKey = false;
        }
      } else if (code === OPEN_BRACE || code === OPEN_BRACKET) this.#open(code, pos);
      else if (code === CLOSE_BRACE || code === CLOSE_BRACKET) this.#close(pos);
      else if (code === COMMA) {
        if (this.#depth === 1) this.#expectKey = true;
        else if (this.#depth === 2 && this.#inItems) {
          this.#item(text.slice(this.#itemStart, pos));
          this.#itemStart = pos + 1;
          this.#separated = true;
        }
      }
      pos += 1;
    }
    this.#pos = pos;
  }

  #open(code: number, pos: number): void {
    this.#depth += 1;
    if (this.#depth === 1) this.#expectKey = code === OPEN_BRACE;
    else if (this.#depth === 2 && code === OPEN_BRACKET && this.#lastKey === ITEMS_KEY && this.#head === undefined) {
      this.#inItems = true;
      this.#head = this.#text.slice(0, pos + 1);
      this.#itemStart = pos + 1;
    }
  }

  #close(pos: number): void {
    if (this.#depth === 2 && this.#inItems) {
      const last = this.#text.slice(this.#itemStart, pos);
      // `[]` has no item; `[{...},]` lacks one (JSON.parse says so).
      if (last.trim() !== '' || this.#separated) this.#item(last);
      this.#inItems = false;
      // From the closing `]` on, the text is kept: the rest of the object.
      this.#tailStart = pos;
    }
    this.#depth -= 1;
  }

  /** Forgets the first COUNT characters of #text. */
  #drop(count: number): void {
    if (count <= 0) return;
    this.#text = this.#text.slice(count);
    this.#pos -= count;
    this.#itemStart = Math.max(0, this.#itemStart - count);
    if (this.#tailStart >= 0) this.#tailStart -= count;
    if (this.#keyStart >= 0) this.#keyStart -= count;
  }

  #item(json: string): void {
    this.#onItem(JSON.parse(json));
  }
}

/**
 * The index of the quote that ends the string whose body starts at FROM, or
 * -1 when TEXT ends first. A quote is escaped when an odd run of
 * backslashes precedes it; the run never reaches before the string's own
 * opening quote, which is still in the text.
 */
function stringEnd(text: string, from: number): number {
  let at = from;
  for (;;) {
    const quote = text.indexOf('"', at);
    if (quote < 0) return -1;
    let backslashes = 0;
    while (text.charCodeAt(quote - 1 - backslashes) === BACKSLASH) backslashes += 1;
    if (backslashes % 2 === 0) return quote;
    at = quote + 1;
  }
}
