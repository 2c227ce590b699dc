// Which character sets and collations the engines on this host offer, so that apply refuses a logical
// database the engine would refuse later (a database left in `error`). PostgreSQL's collations are the
// operating system's locales (`locale -a`, read once); its encodings and MariaDB's character sets are
// compiled into the servers Berth installs (PostgreSQL 15, MariaDB 10.11) and listed here.
import { execFileSync } from 'node:child_process';
import type { CharsetProblem } from './types.js';

/** PostgreSQL's server-side encodings (character sets a database may have). */
const PG_ENCODINGS = [
  'EUC_CN', 'EUC_JP', 'EUC_JIS_2004', 'EUC_KR', 'EUC_TW', 'ISO_8859_5', 'ISO_8859_6', 'ISO_8859_7',
  'ISO_8859_8', 'KOI8R', 'KOI8U', 'LATIN1', 'LATIN2', 'LATIN3', 'LATIN4', 'LATIN5', 'LATIN6', 'LATIN7',
  'LATIN8', 'LATIN9', 'LATIN10', 'MULE_INTERNAL', 'SQL_ASCII', 'UTF8', 'WIN866', 'WIN874', 'WIN1250',
  'WIN1251', 'WIN1252', 'WIN1253', 'WIN1254', 'WIN1255', 'WIN1256', 'WIN1257', 'WIN1258',
]; // prettier-ignore

/** MariaDB 10.11's character sets (SHOW CHARACTER SET); `utf8` is its alias of utf8mb3. */
const MARIADB_CHARSETS = [
  'armscii8', 'ascii', 'big5', 'binary', 'cp1250', 'cp1251', 'cp1256', 'cp1257', 'cp850', 'cp852',
  'cp866', 'cp932', 'dec8', 'eucjpms', 'euckr', 'gb2312', 'gbk', 'geostd8', 'greek', 'hebrew', 'hp8',
  'keybcs2', 'koi8r', 'koi8u', 'latin1', 'latin2', 'latin5', 'latin7', 'macce', 'macroman', 'sjis',
  'swe7', 'tis620', 'ucs2', 'ujis', 'utf16', 'utf16le', 'utf32', 'utf8', 'utf8mb3', 'utf8mb4',
]; // prettier-ignore

/** `de_DE.UTF-8`, `de_DE.utf8` and `de_DE.UTF8` name the same locale. */
const normalLocale = (name: string) => name.toLowerCase().replace(/\.utf-?8$/, '.utf8');

let locales: Set<string> | undefined;

/** The operating system's locales, normalised; C and POSIX always. */
function installedLocales(): Set<string> {
  if (!locales) {
    let listed: string[] = [];
    try {
      listed = execFileSync('locale', ['-a'], { encoding: 'utf8', timeout: 5000 }).split('\n');
    } catch {
      listed = [];
    }
    locales = new Set(['c', 'posix', 'c.utf8', ...listed.filter(Boolean).map(normalLocale)]);
  }
  return locales;
}

/** What the engine would refuse in a logical database's character set and collation, if anything. */
export function charsetProblems(
  engine: 'pg' | 'mysql',
  database: { character_set?: string; collation?: string },
): CharsetProblem[] {
  const problems: CharsetProblem[] = [];
  const { character_set: charset, collation } = database;
  if (engine === 'pg') {
    if (charset !== undefined && !PG_ENCODINGS.includes(charset.toUpperCase().replace(/^UTF-8$/, 'UTF8'))) {
      problems.push({
        field: 'character_set',
        message: `PostgreSQL has no encoding '${charset}'; use one of UTF8, LATIN1, SQL_ASCII, … (${PG_ENCODINGS.length} in all, see docs/api/apply.md).`,
      });
    }
    if (collation !== undefined && !installedLocales().has(normalLocale(collation))) {
      const offered = [...installedLocales()].slice(0, 8).join(', ');
      problems.push({
        field: 'collation',
        message: `The locale '${collation}' is not installed on this host; installed: ${offered} (locale -a lists them all; an operator adds one with Debian's locales package).`,
      });
    }
    return problems;
  }
  const known = (name: string) => MARIADB_CHARSETS.includes(name.toLowerCase());
  if (charset !== undefined && !known(charset)) {
    problems.push({
      field: 'character_set',
      message: `MariaDB has no character set '${charset}'; use one of utf8mb4, latin1, ascii, … (${MARIADB_CHARSETS.length} in all, see docs/api/apply.md).`,
    });
  }
  if (collation !== undefined) {
    // A collation is named after its character set: utf8mb4_unicode_ci, latin1_swedish_ci, binary.
    const of = collation.toLowerCase() === 'binary' ? 'binary' : collation.toLowerCase().split('_')[0]!;
    if (!known(of) || !/^[a-z0-9]+(_[a-z0-9]+)+$|^binary$/i.test(collation)) {
      problems.push({
        field: 'collation',
        message: `MariaDB has no collation '${collation}'; a collation names its character set, such as utf8mb4_unicode_ci or latin1_swedish_ci.`,
      });
    } else if (charset !== undefined && known(charset) && of !== charset.toLowerCase()) {
      problems.push({
        field: 'collation',
        message: `The collation '${collation}' belongs to the character set '${of}', not '${charset}'.`,
      });
    }
  }
  return problems;
}
