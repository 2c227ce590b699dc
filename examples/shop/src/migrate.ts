import { connect } from './db.js';

// Berth runs this before each release goes live (commands.init): it must be safe to run again.
const db = connect();
await db.query(
  `CREATE TABLE IF NOT EXISTS visits (
     id INT AUTO_INCREMENT PRIMARY KEY,
     at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
   )`,
);
await db.end();
console.log('migrations done');
