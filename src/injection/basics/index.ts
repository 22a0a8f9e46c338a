// injection/basics: what every room of the core shares (JSON, quantities, YAML, image references, our names).
export * from './image-reference.js';
export * from './json-pointer.js';
export * from './json.js';
export * from './milli-quantity.js';
export * from './names.js';
export * from './quantity.js';
export * from './yaml.js';
