// The `rabbitmq` runner's entry, where composition imports it from: the runner and its parts are in
// ./rabbitmq/ (index.ts runs the nodes).
export * from './rabbitmq/index.js';
