/**
 * A first-in first-out queue for the per-message paths (send queues, write callbacks): `shift` moves a
 * head index instead of every element behind it (Array#shift), and a queue that empties keeps its
 * storage, so a steady stream of messages allocates nothing here.
 */
export class Fifo<T> implements Iterable<T> {
  private items: (T | undefined)[] = [];
  private head = 0;
  private tail = 0;

  get length(): number {
    return this.tail - this.head;
  }

  push(item: T): void {
    this.items[this.tail++] = item;
  }

  /** The oldest item, left in place. */
  peek(): T | undefined {
    return this.head < this.tail ? this.items[this.head] : undefined;
  }

  shift(): T | undefined {
    const h = this.head;
    if (h === this.tail) return undefined;
    const items = this.items;
    const item = items[h];
    items[h] = undefined;
    if (h + 1 === this.tail) this.head = this.tail = 0;
    else if (h + 1 >= 1024 && (h + 1) * 2 >= this.tail) {
      // Mostly dead storage in front: move the live part down once.
      items.copyWithin(0, h + 1, this.tail);
      const live = this.tail - h - 1;
      items.fill(undefined, live, this.tail);
      this.head = 0;
      this.tail = live;
    } else this.head = h + 1;
    return item;
  }

  /** Removes and returns everything, oldest first. */
  drain(): T[] {
    const out = this.items.slice(this.head, this.tail) as T[];
    this.items.fill(undefined, this.head, this.tail);
    this.head = this.tail = 0;
    return out;
  }

  /** Removes `item` from wherever it is (a linear search: for the rare item taken out of order). */
  remove(item: T): boolean {
    const items = this.items;
    for (let i = this.head; i < this.tail; i++) {
      if (items[i] !== item) continue;
      items.copyWithin(i, i + 1, this.tail);
      items[--this.tail] = undefined;
      if (this.head === this.tail) this.head = this.tail = 0;
      return true;
    }
    return false;
  }

  find(match: (item: T) => boolean): T | undefined {
    for (let i = this.head; i < this.tail; i++) {
      const item = this.items[i] as T;
      if (match(item)) return item;
    }
    return undefined;
  }

  *[Symbol.iterator](): Iterator<T> {
    for (let i = this.head; i < this.tail; i++) yield this.items[i] as T;
  }
}
