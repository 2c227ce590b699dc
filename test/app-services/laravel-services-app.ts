// A laravel-shaped PHP application (issue 15's "done when") that reaches MySQL, Redis, RabbitMQ and
// S3 through nothing but the names Berth injects for laravel (DB_*, REDIS_*, RABBITMQ_*, AWS_*), with
// the PHP extensions Debian has (pdo_mysql, phpredis, php-amqp) and curl for S3 (signed by hand with
// AWS Signature V4, as the SDK would). Its worker service (`php worker.php`) consumes the queue and
// writes each message into MySQL, so one request shows the queue, the worker and the database at work.

const INDEX_PHP = String.raw`<?php
require __DIR__ . '/../lib.php';
$path = parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH);
$value = $_GET['value'] ?? 'none';
header('Content-Type: application/json');
try {
    switch ($path) {
        case '/health':
            echo '"ok"';
            break;
        case '/mysql':
            $db = mysql();
            $db->exec('CREATE TABLE IF NOT EXISTS notes (id INT AUTO_INCREMENT PRIMARY KEY, body VARCHAR(200) NOT NULL)');
            $db->prepare('INSERT INTO notes (body) VALUES (?)')->execute([$value]);
            $found = $db->prepare('SELECT body FROM notes WHERE body = ?');
            $found->execute([$value]);
            echo json_encode(['body' => $found->fetchColumn(), 'user' => $db->query('SELECT CURRENT_USER()')->fetchColumn()]);
            break;
        case '/redis':
            $redis = new Redis();
            $redis->connect(getenv('REDIS_HOST'), (int) getenv('REDIS_PORT'));
            $redis->auth([getenv('REDIS_USERNAME'), getenv('REDIS_PASSWORD')]);
            $redis->set('greeting', $value);
            echo json_encode(['got' => $redis->get('greeting')]);
            break;
        case '/queue':
            [$connection, $channel, $queue] = amqp();
            $exchange = new AMQPExchange($channel);
            $exchange->publish($value, 'jobs', AMQP_NOPARAM, ['delivery_mode' => 2]);
            $connection->disconnect();
            echo json_encode(['queued' => $value, 'connection' => getenv('QUEUE_CONNECTION')]);
            break;
        case '/processed':
            $rows = mysql()->query('SELECT body, worker FROM processed ORDER BY id')->fetchAll(PDO::FETCH_ASSOC);
            echo json_encode($rows);
            break;
        case '/s3':
            $put = s3('PUT', 'notes/hello.txt', $value);
            $get = s3('GET', 'notes/hello.txt');
            echo json_encode(['put' => $put['status'], 'get' => $get['status'], 'body' => $get['body'], 'disk' => getenv('FILESYSTEM_DISK')]);
            break;
        default:
            http_response_code(404);
            echo '"not found"';
    }
} catch (Throwable $e) {
    http_response_code(500);
    echo json_encode(['error' => get_class($e) . ': ' . $e->getMessage()]);
}
`;

const LIB_PHP = String.raw`<?php
function mysql(): PDO {
    $dsn = 'mysql:host=' . getenv('DB_HOST') . ';port=' . getenv('DB_PORT') . ';dbname=' . getenv('DB_DATABASE');
    return new PDO($dsn, getenv('DB_USERNAME'), getenv('DB_PASSWORD'), [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]);
}

/** A connection, a channel and the durable queue "jobs" on the service's vhost. */
function amqp(): array {
    $connection = new AMQPConnection([
        'host' => getenv('RABBITMQ_HOST'),
        'port' => (int) getenv('RABBITMQ_PORT'),
        'login' => getenv('RABBITMQ_USER'),
        'password' => getenv('RABBITMQ_PASSWORD'),
        'vhost' => getenv('RABBITMQ_VHOST'),
    ]);
    $connection->connect();
    $channel = new AMQPChannel($connection);
    $queue = new AMQPQueue($channel);
    $queue->setName('jobs');
    $queue->setFlags(AMQP_DURABLE);
    $queue->declareQueue();
    return [$connection, $channel, $queue];
}

/** One S3 request to the service's bucket, signed with AWS Signature V4 (path-style, as Laravel's disk). */
function s3(string $method, string $key, string $body = ''): array {
    $endpoint = rtrim(getenv('AWS_ENDPOINT'), '/');
    $region = getenv('AWS_DEFAULT_REGION');
    $u = parse_url($endpoint);
    $host = $u['host'] . (isset($u['port']) ? ':' . $u['port'] : '');
    $path = ($u['path'] ?? '') . '/' . getenv('AWS_BUCKET') . '/' . implode('/', array_map('rawurlencode', explode('/', $key)));
    $now = gmdate('Ymd\THis\Z');
    $date = substr($now, 0, 8);
    $hash = hash('sha256', $body);
    $canonical = "$method\n$path\n\nhost:$host\nx-amz-content-sha256:$hash\nx-amz-date:$now\n\nhost;x-amz-content-sha256;x-amz-date\n$hash";
    $scope = "$date/$region/s3/aws4_request";
    $toSign = "AWS4-HMAC-SHA256\n$now\n$scope\n" . hash('sha256', $canonical);
    $signingKey = 'AWS4' . getenv('AWS_SECRET_ACCESS_KEY');
    foreach ([$date, $region, 's3', 'aws4_request'] as $part) {
        $signingKey = hash_hmac('sha256', $part, $signingKey, true);
    }
    $signature = hash_hmac('sha256', $toSign, $signingKey);
    $curl = curl_init($endpoint . substr($path, strlen($u['path'] ?? '')));
    curl_setopt_array($curl, [
        CURLOPT_CUSTOMREQUEST => $method,
        CURLOPT_RETURNTRANSFER => true,
        CURLOPT_HTTPHEADER => [
            'Authorization: AWS4-HMAC-SHA256 Credential=' . getenv('AWS_ACCESS_KEY_ID') . "/$scope, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=$signature",
            "x-amz-date: $now",
            "x-amz-content-sha256: $hash",
        ],
    ]);
    if ($method === 'PUT') curl_setopt($curl, CURLOPT_POSTFIELDS, $body);
    $response = curl_exec($curl);
    $status = curl_getinfo($curl, CURLINFO_RESPONSE_CODE);
    curl_close($curl);
    return ['status' => $status, 'body' => $response];
}
`;

/** The worker service: takes messages off the queue and records them, with its pid, in MySQL. */
const WORKER_PHP = String.raw`<?php
require __DIR__ . '/lib.php';
$db = mysql();
$db->exec('CREATE TABLE IF NOT EXISTS processed (id INT AUTO_INCREMENT PRIMARY KEY, body VARCHAR(200) NOT NULL, worker INT NOT NULL)');
[$connection, $channel, $queue] = amqp();
fwrite(STDOUT, "worker " . getmypid() . " waiting for jobs\n");
while (true) {
    $message = $queue->get();
    if ($message === false) { usleep(100000); continue; }
    $db->prepare('INSERT INTO processed (body, worker) VALUES (?, ?)')->execute([$message->getBody(), getmypid()]);
    $queue->ack($message->getDeliveryTag());
}
`;

export function laravelServicesAppFiles(): Record<string, string> {
  return {
    'public/index.php': INDEX_PHP,
    'lib.php': LIB_PHP,
    'worker.php': WORKER_PHP,
    artisan: '#!/usr/bin/env php\n<?php\nfwrite(STDERR, "artisan: nothing here\\n");\nexit(1);\n',
    'composer.json': JSON.stringify({
      name: 'berth/laravel-services-fixture',
      require: { php: '^8.2', 'ext-redis': '*', 'ext-amqp': '*', 'ext-pdo_mysql': '*', 'ext-curl': '*' },
    }),
  };
}
