/**
 * A list call: `await` it for the first page, or `for await` over it for every item, one page fetched at a time
 * (only the current page is held). Nothing is requested until either happens.
 */
export declare class PagePromise<Page, Item> implements PromiseLike<Page>, AsyncIterable<Item> {
    private readonly fetchFirst;
    private readonly itemsOf;
    /** The call that fetches the page after this one, or null on the last page. */
    private readonly nextOf;
    private first?;
    constructor(fetchFirst: () => Promise<Page>, itemsOf: (page: Page) => Item[], 
    /** The call that fetches the page after this one, or null on the last page. */
    nextOf: (page: Page) => (() => Promise<Page>) | null);
    then<A = Page, B = never>(onFulfilled?: ((page: Page) => A | PromiseLike<A>) | null, onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<A | B>;
    catch<B = never>(onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<Page | B>;
    /** Every page in turn. */
    pages(): AsyncGenerator<Page, void, undefined>;
    [Symbol.asyncIterator](): AsyncGenerator<Item, void, undefined>;
    /** Every item in one array: for small lists only (it holds them all). `limit` stops early. */
    toArray(limit?: number): Promise<Item[]>;
}
