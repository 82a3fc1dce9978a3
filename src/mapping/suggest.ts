/** Levenshtein distance, small strings only (element and key names). */
function distance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length];
}

/** The closest candidate to a misspelt name, or undefined when nothing is close enough to be a likely typo. */
export function closest(name: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestScore = Infinity;
  for (const candidate of candidates) {
    const [n, c] = [name.toLowerCase(), candidate.toLowerCase()];
    // Case slips (clinicalstatus) are the commonest typo, then a name cut short or run on (created / created_at).
    const score = n === c ? 0 : n.length >= 3 && (c.startsWith(n) || n.startsWith(c)) ? 1.5 : distance(n, c);
    if (score < bestScore) [best, bestScore] = [candidate, score];
  }
  return bestScore <= Math.max(2, Math.floor(name.length / 3)) ? best : undefined;
}

/** " (did you mean `x`?)" or "" — appended to "unknown …" messages. */
export function didYouMean(name: string, candidates: Iterable<string>): string {
  const best = closest(name, candidates);
  return best === undefined ? '' : ` (did you mean \`${best}\`?)`;
}
