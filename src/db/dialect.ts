// The two store engines Berth runs on. Its own file so that connect.ts and the migrations, which both
// need it, do not import each other.
export type Dialect = 'sqlite' | 'postgres';
