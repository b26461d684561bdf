import { loadConfig } from '../config.ts';
import { openDatabase } from './database.ts';

// `npm run migrate`: opening the database applies every pending migration (the same code runs at
// every start), then closes it again.
const database = await openDatabase(loadConfig());
await database.close();
console.log(`Schema of the ${database.kind} database is up to date.`);
