/**
 * A list call: `await` it for the first page, or `for await` over it for every item, one page fetched at a time
 * (only the current page is held). Nothing is requested until either happens.
 */
export class PagePromise {
    fetchFirst;
    itemsOf;
    nextOf;
    first;
    constructor(fetchFirst, itemsOf, 
    /** The call that fetches the page after this one, or null on the last page. */
    nextOf) {
        this.fetchFirst = fetchFirst;
        this.itemsOf = itemsOf;
        this.nextOf = nextOf;
    }
    then(onFulfilled, onRejected) {
        return (this.first ??= this.fetchFirst()).then(onFulfilled, onRejected);
    }
    catch(onRejected) {
        return this.then(undefined, onRejected);
    }
    /** Every page in turn. */
    async *pages() {
        let fetchPage = this.fetchFirst;
        while (fetchPage) {
            const page = await fetchPage();
            fetchPage = this.nextOf(page);
            yield page;
        }
    }
    async *[Symbol.asyncIterator]() {
        for await (const page of this.pages())
            yield* this.itemsOf(page);
    }
    /** Every item in one array: for small lists only (it holds them all). `limit` stops early. */
    async toArray(limit = Infinity) {
        const items = [];
        for await (const item of this) {
            if (items.length >= limit)
                break;
            items.push(item);
        }
        return items;
    }
}
