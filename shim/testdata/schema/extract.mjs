// Writes the official MCP JSON schemas that @modelcontextprotocol/conformance
// bundles (copied into it from the specification repository by its
// sync-schema script) as one VERSION.json file each. The bundle keeps them
// as JavaScript object literals in a table keyed by protocol version; this
// finds that table, reads each literal and evaluates it alone, with no
// access to anything else.
//
// usage: node extract.mjs DIST_INDEX_JS OUT_DIR
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import vm from 'node:vm';

const [src, out] = [readFileSync(process.argv[2], 'utf8'), process.argv[3]];

// const X={"2025-03-26":A,"2025-06-18":B,"2025-11-25":C,[V]:D} where V holds "2026-07-28".
const table = src.match(/=\{"2025-03-26":(\w+),"2025-06-18":(\w+),"2025-11-25":(\w+),\[(\w+)\]:(\w+)\}/);
if (!table) throw new Error('no schema table in the bundle');
const modern = src.match(new RegExp(`[,;{ ]${table[4]}=\`(\\d{4}-\\d{2}-\\d{2})\``));
if (!modern || modern[1] !== '2026-07-28') throw new Error('the table\'s last key is not 2026-07-28');

// literal returns the object literal assigned to name, by matching braces
// outside strings.
function literal(name) {
  const start = src.indexOf(`${name}={$schema:`);
  if (start < 0) throw new Error(`no schema literal ${name}`);
  let depth = 0, quote = null;
  for (let i = start + name.length + 1; i < src.length; i++) {
    const c = src[i];
    if (quote) {
      if (c === '\\') i++;
      else if (c === quote) quote = null;
      continue;
    }
    if (c === '"' || c === "'" || c === '`') quote = c;
    else if (c === '{') depth++;
    else if (c === '}' && --depth === 0) return src.slice(start + name.length + 1, i + 1);
  }
  throw new Error(`unterminated schema literal ${name}`);
}

const versions = { '2025-03-26': table[1], '2025-06-18': table[2], '2025-11-25': table[3], '2026-07-28': table[5] };
for (const [version, name] of Object.entries(versions)) {
  const schema = vm.runInNewContext(`(${literal(name)})`, Object.create(null), { timeout: 5000 });
  writeFileSync(join(out, `${version}.json`), JSON.stringify(schema));
}
