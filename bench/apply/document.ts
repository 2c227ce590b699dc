// The representative document of the apply benchmark: every block of the spec, a few entries each.
export function representative(team: number): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Infrastructure',
    metadata: { name: 'shop', team },
    spec: {
      application: {
        type: 'laravel',
        version: '12',
        repository: { url: 'https://github.com/acme/shop', branch: 'main' },
        runtime: { php_version: '8.4' },
        commands: { build: ['composer install --no-dev'], init: ['php artisan migrate --force'] },
        settings: { health_check_path: '/up', replicas: 2, memory: '1024Mi', scheduler_enabled: true },
        php: { extensions: ['intl', 'redis'], settings: ['memory_limit=512M'] },
      },
      domains: [{ domain: 'shop.example.com' }, { domain: 'www.shop.example.com' }],
      secrets: [
        { key: 'APP_KEY', value: 'base64:0123456789abcdef' },
        { key: 'MAIL_PASSWORD', value: 'secret' },
      ],
      volumes: [{ name: 'storage', mount_path: '/var/www/html/storage', volume_size: 10 }],
      services: [
        { name: 'cache', type: 'valkey', version: '8', memory: '512Mi' },
        { name: 'queue', type: 'worker', memory: '1Gi', command: 'php artisan queue:work' },
      ],
      container_services: [{ name: 'pdf', type: 'gotenberg', version: '8', memory: '1Gi' }],
      managed_databases: [{ name: 'main-db', type: 'pg', plan: '1x2xCPU-4GB-50GB', zone: 'de-fra1' }],
      object_storage: [{ name: 'files', zone: 'europe-1', buckets: ['shop-uploads'] }],
    },
  };
}
