// The `gotenberg` runner's entry, where composition imports it from: the runner and its parts are in
// ./gotenberg/ (index.ts is the listener).
export * from './gotenberg/index.js';
