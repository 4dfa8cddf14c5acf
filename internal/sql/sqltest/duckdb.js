// duckdb.js: the DuckDB side of package sqltest's Oracle. One run is one
// batch: read a JSON request from stdin, load its tables into a fresh
// in-memory DuckDB, run its queries in order, print one JSON response on
// stdout. The request and response shapes are documented in oracle.go;
// this script is embedded there and written to a temporary file per run.
//
// Values arrive as text (PostgreSQL's text form, or null) and are cast
// by DuckDB to the declared column type, so an int8 beyond 2^53 or a
// decimal never passes through a JavaScript number. Results leave through
// the node API's JSON converter: BIGINT, HUGEINT, DECIMAL and temporal
// values as strings, DOUBLE as the shortest round-tripping number (NaN and
// the infinities as strings), INTERVAL as {months, days, micros}.
'use strict';

const { DuckDBInstance } = require('@duckdb/node-api');

async function readStdin() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return Buffer.concat(chunks).toString('utf8');
}

function quoteIdent(s) {
  return '"' + String(s).replace(/"/g, '""') + '"';
}

async function loadTable(conn, t) {
  const cols = t.columns.map((c) => quoteIdent(c.name) + ' ' + c.type);
  await conn.run(`CREATE TABLE ${quoteIdent(t.name)} (${cols.join(', ')})`);
  const rows = t.rows || [];
  if (rows.length === 0) return;
  // The appender fills an all-VARCHAR staging table; one INSERT ... SELECT
  // then casts every column with DuckDB's own text parsers.
  const stage = quoteIdent('__stage_' + t.name);
  const stageCols = t.columns.map((_, i) => `c${i} VARCHAR`);
  await conn.run(`CREATE TEMP TABLE ${stage} (${stageCols.join(', ')})`);
  const app = await conn.createAppender('__stage_' + t.name);
  for (const [r, row] of rows.entries()) {
    if (row.length !== t.columns.length) {
      throw new Error(`table ${t.name} row ${r}: ${row.length} values for ${t.columns.length} columns`);
    }
    for (const v of row) {
      if (v === null) app.appendNull();
      else app.appendVarchar(String(v));
    }
    app.endRow();
  }
  app.closeSync();
  const casts = t.columns.map((c, i) => `CAST(c${i} AS ${c.type})`);
  await conn.run(`INSERT INTO ${quoteIdent(t.name)} SELECT ${casts.join(', ')} FROM ${stage}`);
  await conn.run(`DROP TABLE ${stage}`);
}

async function runQuery(conn, q, maxRows) {
  const out = { name: q.name };
  try {
    // Read one row past the bound to tell "exactly maxRows" from "more".
    const reader = await conn.runAndReadUntil(q.sql, maxRows + 1);
    if (reader.currentRowCount > maxRows) {
      throw new Error(`more than ${maxRows} rows (the oracle's bound per query)`);
    }
    out.columns = reader.columnNames().map((name, i) => ({
      name,
      type: reader.columnType(i).toString(),
    }));
    out.rows = reader.getRowsJson();
  } catch (e) {
    out.error = String(e && e.message ? e.message : e);
  }
  return out;
}

async function main() {
  const req = JSON.parse(await readStdin());
  const maxRows = req.max_rows || 100000;
  const db = await DuckDBInstance.create(':memory:', { threads: String(req.threads || 1) });
  const conn = await db.connect();
  // Results must not depend on the machine's zone or locale.
  await conn.run("SET TimeZone = 'UTC'");
  const version = (await conn.runAndReadAll('SELECT version()')).getRowsJson()[0][0];
  for (const t of req.tables || []) {
    try {
      await loadTable(conn, t);
    } catch (e) {
      process.stdout.write(JSON.stringify({ version, error: `load ${t.name}: ${e.message || e}` }));
      return;
    }
  }
  const results = [];
  for (const q of req.queries || []) results.push(await runQuery(conn, q, maxRows));
  conn.closeSync();
  process.stdout.write(JSON.stringify({ version, results }));
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + '\n');
  process.exit(1);
});
