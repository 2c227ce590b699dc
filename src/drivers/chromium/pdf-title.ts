// Chromium titles a PDF with the page's <title>, or else with the page's address: for Berth's pages
// that is an internal origin (`s1-….invalid/blank`), which users must not see. Without a <title>
// the Info dictionary's Title is blanked in place: same length, so every byte offset of the file
// (the xref table) stays right and no rewrite of a possibly large PDF is needed.

const latin1 = (bytes: Buffer, from: number, to: number) => bytes.toString('latin1', from, to);

/** Blanks the Title of the document Info dictionary in place; returns whether one was found. */
export function blankPdfTitle(pdf: Buffer): boolean {
  // The trailer sits near the end; its /Info names the Info object.
  const tail = latin1(pdf, Math.max(0, pdf.length - 4096), pdf.length);
  const info = /\/Info (\d+) 0 R/.exec(tail);
  if (!info) return false;
  const header = Buffer.from(`\n${info[1]} 0 obj`, 'latin1');
  const start = pdf.indexOf(header);
  if (start < 0) return false;
  const end = pdf.indexOf('endobj', start, 'latin1');
  if (end < 0) return false;
  const title = pdf.indexOf('/Title (', start, 'latin1');
  if (title < 0 || title > end) return false;
  // A literal string ends at the first unescaped `)` that balances its `(`s.
  let depth = 0;
  let i = title + '/Title '.length;
  for (; i < end; i++) {
    const c = pdf[i];
    if (c === 0x5c)
      i++; // backslash escapes the next byte
    else if (c === 0x28) depth++;
    else if (c === 0x29 && --depth === 0) break;
  }
  if (i >= end) return false;
  const open = title + '/Title '.length;
  pdf[open + 1] = 0x29; // `()` ...
  pdf.fill(0x20, open + 2, i + 1); // ... then spaces, which a dictionary allows between entries
  return true;
}
