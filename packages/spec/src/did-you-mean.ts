// Suggestions for misspelt keys and names: a known word within edit distance 2, or one that differs
// only in case and underscores (`requestPeriod` for `request_period`). Short words get a smaller
// allowance — any two-letter name is within distance 2 of any other, which would be noise.

const MAX_DISTANCE = 2;

export function closestMatch(word: string, candidates: Iterable<string>): string | undefined {
  const normalized = normalize(word);
  const allowed = Math.min(MAX_DISTANCE, Math.floor(word.length / 3));
  let best: string | undefined;
  let bestDistance = allowed + 1;
  for (const candidate of candidates) {
    const distance = normalize(candidate) === normalized ? 0 : editDistance(word, candidate);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

function normalize(word: string): string {
  return word.replaceAll(/[_-]/g, "").toLowerCase();
}

/** Levenshtein distance with one rolling row; keys are short, so O(n·m) is nothing. */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current[j] = Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution);
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}
