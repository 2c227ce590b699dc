import mysql from 'mysql2/promise';

// The application's own names for its database: shop.yaml fills them from the `db` service.
function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

/** A pool: a connection the server dropped is replaced at the next query. */
export function connect(): mysql.Pool {
  return mysql.createPool({
    host: required('MYSQL_HOST'),
    port: Number(required('MYSQL_PORT')),
    user: required('MYSQL_USER'),
    password: required('MYSQL_PASSWORD'),
    database: required('MYSQL_DATABASE'),
    connectionLimit: 5,
  });
}
