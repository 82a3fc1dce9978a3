/**
 * A list call: `await` it for the first page, or `for await` over it for every item, one page fetched at a time
 * (only the current page is held). Nothing is requested until either happens.
 */
export class PagePromise<Page, Item> implements PromiseLike<Page>, AsyncIterable<Item> {
  private first?: Promise<Page>;

  constructor(
    private readonly fetchFirst: () => Promise<Page>,
    private readonly itemsOf: (page: Page) => Item[],
    /** The call that fetches the page after this one, or null on the last page. */
    private readonly nextOf: (page: Page) => (() => Promise<Page>) | null,
  ) {}

  then<A = Page, B = never>(onFulfilled?: ((page: Page) => A | PromiseLike<A>) | null, onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<A | B> {
    return (this.first ??= this.fetchFirst()).then(onFulfilled, onRejected);
  }

  catch<B = never>(onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<Page | B> {
    return this.then(undefined, onRejected);
  }

  /** Every page in turn. */
  async *pages(): AsyncGenerator<Page, void, undefined> {
    let fetchPage: (() => Promise<Page>) | null = this.fetchFirst;
    while (fetchPage) {
      const page: Page = await fetchPage();
      fetchPage = this.nextOf(page);
      yield page;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Item, void, undefined> {
    for await (const page of this.pages()) yield* this.itemsOf(page);
  }

  /** Every item in one array: for small lists only (it holds them all). `limit` stops early. */
  async toArray(limit = Infinity): Promise<Item[]> {
    const items: Item[] = [];
    for await (const item of this) {
      if (items.length >= limit) break;
      items.push(item);
    }
    return items;
  }
}
